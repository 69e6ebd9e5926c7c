package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

var errHelp = errors.New("help shown")

// parse parses args with fs, printing the usage to stdout for -h and
// turning a parse error into a usageError.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, usage string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return errHelp
		}
		fmt.Fprint(stderr, usage)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
		return usageError{err.Error()}
	}
	return nil
}
