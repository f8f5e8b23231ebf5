package main

import (
	"fmt"
	"os"
)

func benchCmd(args []string) int {
	fmt.Fprintln(os.Stderr, "cubicle bench: not implemented yet")
	return 1
}
