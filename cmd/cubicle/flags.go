package main

import (
	"flag"

	"github.com/cubicle-sandbox/cubicle/internal/cliflag"
)

// defaultData is where computers' disks and records live unless --data says otherwise.
const defaultData = cliflag.DefaultData

// newFlags makes the flag set of 'cubicle name', whose errors parse reports.
func newFlags(name, usageText string) *flag.FlagSet {
	return cliflag.NewFlags("cubicle", name, usageText)
}

// parse parses args; it returns an exit code when the command must stop
// (0 after --help, 2 after a bad flag, with a one-line error naming it).
func parse(fs *flag.FlagSet, args []string) (int, bool) { return cliflag.Parse(fs, args) }
