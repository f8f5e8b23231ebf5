package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox/linux"
)

const gcUsage = `Usage: cubicle gc [flags]

Removes what computers of killed cubicle processes left behind: their
processes, cgroups, loop devices, mounts and directories. Computers whose
owner is still running are not touched. Also runs at every start.

Example:
  cubicle gc --kept --json

Flags:
`

func gcCmd(args []string) int {
	fs := newFlags("gc", gcUsage)
	kept := fs.Bool("kept", false, "also remove workspaces kept by 'cubicle run --keep'")
	data := fs.String("data", defaultData, "state directory")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "cubicle gc: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	drv, err := linux.New(linux.Config{StateDir: *data})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle gc: %v\n", err)
		return 1
	}
	var rep sandbox.GCReport
	if *kept {
		rep, err = drv.RemoveKept(context.Background())
	} else {
		rep, err = drv.GC(context.Background())
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(rep)
	} else {
		fmt.Printf("removed %d computers (%d cgroups, %d loop devices, %d mounts)\n", rep.Computers, rep.Cgroups, rep.Loops, rep.Mounts)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cubicle gc: %v\n", err)
		return 1
	}
	return 0
}
