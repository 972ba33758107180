package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What docs/testing.md quotes: a command's CPU by program. Here a shell
// that counts to 200,000 (a second or so of a loaded CPU), sampled every
// 100ms, is listed with most of that time, beside the machine's totals.
func TestItListsTheCPUOfWhatTheCommandRan(t *testing.T) {
	if testing.Short() {
		t.Skip("spins a CPU for a second")
	}
	bin := t.TempDir() + "/cpusample"
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())
	out, err := exec.Command(bin, "-every", "100ms", "--", "sh", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`).CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`(?m)^\s+([\d.]+)  sh$`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "sh among the programs:\n%s", out)
	cpu, _ := strconv.ParseFloat(m[1], 64)
	assert.Greater(t, cpu, 0.2, "%s", out)
	assert.Regexp(t, `machine busy \d+ s, idle \d+ s`, string(out))
}
