package flow

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

func ErrorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return fmt.Sprintf("%s: %s", appErr.Type(), appErr.Message())
	}
	return err.Error()
}
