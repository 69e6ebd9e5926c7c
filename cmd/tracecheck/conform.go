package main

import (
	"context"
	"io"
)

func cmdConform(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return usageError{"not yet"}
}
