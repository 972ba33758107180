package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/api/serviceerror"
)

// Which of Temporal's errors the CLI waits out. A query of a lease whose
// run just continued as new can meet the new run before its first task
// (WorkflowNotReady): `status` waits instead of failing.
func TestTransientErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{serviceerror.NewUnavailable("down"), true},
		{serviceerror.NewResourceExhausted(0, "busy"), true},
		{serviceerror.NewDeadlineExceeded("slow"), true},
		{fmt.Errorf("query: %w", serviceerror.NewWorkflowNotReady("not ready")), true},
		{serviceerror.NewNotFound("workflow not found"), false},
		{serviceerror.NewInvalidArgument("bad"), false},
		{errors.New("plain"), false},
	} {
		assert.Equal(t, c.want, transient(c.err), "%T %v", c.err, c.err)
	}
}
