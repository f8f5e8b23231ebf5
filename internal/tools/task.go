package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// Shell tasks: builtin__computer_exec with background true starts its
// command as a background process of the computer (sandbox.Background)
// and answers at once with the task's id; exec with task_id answers a
// task's status and its newest output, waiting up to timeout_seconds for
// it to end. What keeps the computer standing for a task is the caller's
// (the gateway keeps a response's computer with its conversation).

// Fixed sentences of shell tasks.
var (
	// TooManyTasksSentence: the computer holds as many background
	// processes as it may, all running.
	TooManyTasksSentence = "The computer already runs as many shell tasks as it may; wait for one to end or stop one (kill its pid)."
	// BothCommandAndTaskSentence: exec was given a command and a task_id.
	BothCommandAndTaskSentence = "Invalid arguments: give either command or task_id, not both."
	// BackgroundWithTaskSentence: exec was given background true and a task_id.
	BackgroundWithTaskSentence = "Invalid arguments: background starts a command; leave it out with task_id."
)

// noSuchTask is the answer for a task id the computer does not hold.
func noSuchTask(id string) Result {
	return failed("No such task in this computer: %s", id)
}

// Bounds of shell tasks.
const (
	// maxTaskIDBytes bounds a task_id (ids are "proc_<n>").
	maxTaskIDBytes = 64
	// maxTaskSeconds bounds a task's own time limit (a computer's lifetime
	// ends it much sooner).
	maxTaskSeconds = 1 << 31
	// taskHeadroom is kept of the answer for the lines around the output.
	taskHeadroom = 256
	// taskPoll is how often a wait checks whether the task ended.
	taskPoll = 200 * time.Millisecond
)

// startTask starts command as a shell task: its stdin closed, no time
// limit unless timeout (whole seconds) is given.
func startTask(ctx context.Context, env Env, command string, timeout *int) (Result, error) {
	var limit time.Duration
	if timeout != nil {
		limit = time.Duration(min(*timeout, maxTaskSeconds)) * time.Second
	}
	info, err := env.Sandbox.StartProcess(ctx, sandbox.ProcessStart{Command: command, Timeout: limit, CloseStdin: true})
	if err != nil {
		switch {
		case errors.Is(err, sandbox.ErrTooManyProcesses):
			return failed("%s", TooManyTasksSentence), nil
		case errors.Is(err, sandbox.ErrProcLimit):
			return failed("%s", ProcLimitSentence), nil
		case errors.Is(err, sandbox.ErrInvalid):
			return failed("Invalid arguments: command is not valid."), nil
		}
		return Result{}, err
	}
	return Result{Output: FormatTaskStarted(info), TaskID: info.ID}, nil
}

// readTask answers task id's status and newest output, after waiting up
// to wait seconds (nil: not at all; brought down to the exec limit) for it
// to end.
func readTask(ctx context.Context, env Env, id string, wait *int, lim Limits) (Result, error) {
	switch {
	case strings.TrimSpace(id) == "":
		return failed("Invalid arguments: task_id must not be empty."), nil
	case len(id) > maxTaskIDBytes || strings.ContainsAny(id, "\x00\n"):
		return failed("Invalid arguments: task_id is not the id of a task."), nil
	}
	info, err := env.Sandbox.GetProcess(ctx, id)
	if wait != nil && err == nil && info.Running {
		info, err = waitTask(ctx, env.Sandbox, id, CapSeconds(lim.ExecTimeout, *wait))
	}
	if err != nil {
		return taskError(err, id)
	}
	budget := int64(lim.MaxAnswerBytes - taskHeadroom)
	from := max(info.OutputStart, info.OutputEnd-budget)
	out, errb := &capture{max: budget}, &capture{max: budget}
	notShown := from // and what the computer no longer held when read
	if info.OutputEnd > from {
		_, err = env.Sandbox.ProcessOutput(ctx, sandbox.OutputRequest{ID: id, Offset: from, Limit: info.OutputEnd - from},
			sandbox.OutputIO{Stdout: out, Stderr: errb, Mark: func(_, dropped int64) { notShown += dropped }})
		if err != nil {
			return taskError(err, id)
		}
	}
	stdout, stderr := string(out.buf), string(errb.buf)
	if env.Redact != nil {
		var hidden int64
		stdout, stderr, hidden = redactTask(env.Redact, stdout, stderr, notShown > 0, info.Running, int(budget))
		notShown += hidden
	}
	return Result{Output: FormatTask(info, stdout, stderr, notShown, lim.MaxAnswerBytes)}, nil
}

// redactTask redacts a task's window of output for a key that redacts
// personal data. Its edges may cut a datum in two, where no redaction
// would know it: its first line is left out when output before it is not
// shown (partial), and a running task's line that is not complete yet
// waits. The redacted lines are longer than the output they stand for:
// the newest that fit in room are shown. hidden counts the bytes of the
// output left out at the front.
func redactTask(redact func(string) string, stdout, stderr string, partial, running bool, room int) (string, string, int64) {
	var hidden [4]int64
	stdout, hidden[0] = wholeLines(stdout, partial, running)
	stderr, hidden[1] = wholeLines(stderr, partial, running)
	stderr, hidden[2] = newestRedacted(redact, stderr, room)
	stdout, hidden[3] = newestRedacted(redact, stdout, room-len(stderr))
	return stdout, stderr, hidden[0] + hidden[1] + hidden[2] + hidden[3]
}

// wholeLines is s without its first line (head: it may begin inside one)
// and without what follows its last line break (tail: the line is not
// complete yet), when s has a line break; cut counts what the head took.
func wholeLines(s string, head, tail bool) (string, int64) {
	var cut int64
	if i := strings.IndexByte(s, '\n'); head && i >= 0 {
		s, cut = s[i+1:], int64(i+1)
	}
	if i := strings.LastIndexAny(s, "\n\r"); tail && i >= 0 {
		s = s[:i+1]
	}
	return s, cut
}

// newestRedacted is s redacted line by line (no datum spans a line), as
// much of its end as fits in room bytes, in whole lines; dropped counts the
// bytes before redaction of the lines left out.
func newestRedacted(redact func(string) string, s string, room int) (string, int64) {
	lines := strings.SplitAfter(s, "\n")
	kept, n := make([]string, 0, len(lines)), 0
	for i := len(lines) - 1; i >= 0; i-- {
		r := redact(lines[i])
		if n+len(r) > room {
			var dropped int64
			for _, l := range lines[:i+1] {
				dropped += int64(len(l))
			}
			slices.Reverse(kept)
			return strings.Join(kept, ""), dropped
		}
		kept, n = append(kept, r), n+len(r)
	}
	slices.Reverse(kept)
	return strings.Join(kept, ""), 0
}

// waitTask polls task id until it ended or d passed, and answers it as it
// is then.
func waitTask(ctx context.Context, sb sandbox.Background, id string, d time.Duration) (sandbox.ProcessInfo, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(taskPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return sandbox.ProcessInfo{}, ctx.Err()
		case <-deadline.C:
			return sb.GetProcess(ctx, id)
		case <-tick.C:
		}
		info, err := sb.GetProcess(ctx, id)
		if err != nil || !info.Running {
			return info, err
		}
	}
}

// taskError is the sentence of a task call's sandbox error, or err itself
// (the computer's failure).
func taskError(err error, id string) (Result, error) {
	if errors.Is(err, sandbox.ErrNoProcess) {
		return noSuchTask(id), nil
	}
	return Result{}, err
}

// FormatTaskStarted is the answer of a task that started:
//
//	task_id: <id>
//	pid: <pid inside the computer>
//	status: running
func FormatTaskStarted(info sandbox.ProcessInfo) string {
	return fmt.Sprintf("task_id: %s\npid: %d\nstatus: running", info.ID, info.Pid)
}

// FormatTask renders a task's status and the newest part of its output
// (stdout and stderr; notShown bytes of its output are not in them), cut
// at max bytes like every answer:
//
//	task_id: <id>
//	status: running | exited
//	exit_code: <n>            (once exited; or: timed out after <n> seconds)
//	[earlier output not shown: <n> bytes]   (when notShown > 0)
//	stdout:
//	<stdout>
//	stderr:
//	<stderr>
func FormatTask(info sandbox.ProcessInfo, stdout, stderr string, notShown int64, max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "task_id: %s\n", info.ID)
	switch {
	case info.Running:
		b.WriteString("status: running\n")
	case info.Exit.TimedOut:
		b.WriteString("status: exited\n" + sandbox.ExecTimedOut(int(info.Exit.Duration.Round(time.Second)/time.Second)) + "\n")
	default:
		fmt.Fprintf(&b, "status: exited\nexit_code: %d\n", info.Exit.ExitCode)
	}
	if notShown > 0 {
		fmt.Fprintf(&b, "%s\n", EarlierOutputNote(notShown))
	}
	b.WriteString("stdout:\n" + strings.ToValidUTF8(stdout, "\uFFFD") + "\nstderr:\n" + strings.ToValidUTF8(stderr, "\uFFFD"))
	return Truncate(b.String(), max)
}

// EarlierOutputNote says that a task's first n bytes of output are not in
// the answer (left out for the newest, or no longer kept by the computer).
func EarlierOutputNote(n int64) string {
	return fmt.Sprintf("[earlier output not shown: %d bytes]", n)
}
