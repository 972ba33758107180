package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return fmt.Sprintf("%s: %s", appErr.Type(), appErr.Message())
	}
	return err.Error()
}
