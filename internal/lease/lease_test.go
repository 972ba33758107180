package lease

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidateID(t *testing.T) {
	for _, ok := range []string{"a", "web-prod-1", "0abc", strings.Repeat("a", 40)} {
		assert.NoError(t, ValidateID(ok), ok)
	}
	for _, tc := range []struct{ id, says string }{
		{"", "must not be empty"},
		{strings.Repeat("a", 41), "at most 40"},
		{"Web_Prod", `"web-prod"`},
		{"-web", "starting and ending with a letter or digit"},
		{"web-", "starting and ending"},
		{"web.prod", `"web-prod"`},
		{"web prod", "lowercase letters"},
	} {
		err := ValidateID(tc.id)
		if assert.Error(t, err, tc.id) {
			assert.Contains(t, err.Error(), tc.says, tc.id)
		}
	}
}

func TestSuggestIDIsValid(t *testing.T) {
	for _, in := range []string{"Web_Prod", "___", "A.B.C", "é", strings.Repeat("X_", 40)} {
		assert.NoError(t, ValidateID(suggestID(in)), in)
	}
}

func TestValidateOwner(t *testing.T) {
	assert.NoError(t, ValidateOwner("akash1qqzwc5d7hynl67nsmn9jukvwqp3vzdl6j2t7lk"))
	assert.NoError(t, ValidateOwner("Tenant_A.1"))
	assert.Error(t, ValidateOwner(""))
	assert.Error(t, ValidateOwner("a/b"))
	assert.Error(t, ValidateOwner(strings.Repeat("a", 64)))
}
