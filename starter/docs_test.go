package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 34.5: every deployflow command line that the README and the pages
// of docs/ show in their code blocks is one the CLI takes: its command path
// exists in the cobra tree and each flag it uses is one of that command's
// (nothing is run). A command line is a line after "$ " in any block, or a
// line of a sh block that starts with deployflow or bin/deployflow; the
// CLI's synopsis (a plain block of "deployflow <command> ..." lines) has
// its flags checked against each command it names.
func TestEveryCommandInTheDocsParses(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	files = append([]string{"../README.md"}, files...)
	commands, synopses := 0, 0
	for _, file := range files {
		name := strings.TrimPrefix(file, "../")
		for _, b := range fencedBlocks(t, file) {
			shell := b.lang == "sh" || b.lang == "bash" || b.lang == "shell"
			transcript := false // a block with "$ " lines: the rest is output
			for _, l := range b.lines {
				transcript = transcript || strings.HasPrefix(l.text, "$ ")
			}
			for i := 0; i < len(b.lines); i++ {
				line, at := b.lines[i].text, b.lines[i].n
				// A command continued on the next lines with a backslash.
				for strings.HasSuffix(strings.TrimSpace(line), `\`) && i+1 < len(b.lines) {
					i++
					line = strings.TrimSuffix(strings.TrimSpace(line), `\`) + " " + b.lines[i].text
				}
				cmdLine, prompted := strings.CutPrefix(line, "$ ")
				switch {
				case prompted || shell:
					fields := strings.Fields(cmdLine)
					for len(fields) > 0 && assignment.MatchString(fields[0]) {
						fields = fields[1:] // VAR=value before the command
					}
					if len(fields) == 0 || (fields[0] != "deployflow" && fields[0] != "bin/deployflow") {
						continue
					}
					words, err := shellWords(cmdLine)
					require.NoError(t, err, "%s:%d: %q", name, at, line)
					for len(words) > 0 && assignment.MatchString(words[0]) {
						words = words[1:]
					}
					commands++
					if msg := parseCommand(words[1:]); msg != "" {
						t.Errorf("%s:%d: %q does not parse against the CLI: %s", name, at, strings.TrimSpace(line), msg)
					}
				case b.lang == "" && !transcript && synopsis.MatchString(line):
					synopses++
					for _, msg := range checkSynopsis(line) {
						t.Errorf("%s:%d: the synopsis line %q: %s", name, at, strings.TrimSpace(line), msg)
					}
				}
			}
		}
	}
	require.Greater(t, commands, 10, "the docs' deployflow command lines were read")
	require.Greater(t, synopses, 10, "the CLI synopsis was read (docs/cli.md)")
}

var (
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	// deployflow, then a command or several: "deployflow pause|resume ..."
	synopsis = regexp.MustCompile(`^deployflow [a-z]+(\|[a-z]+)*(\s|$)`)
)

// parseCommand finds args' command in a fresh command tree and parses its
// flags, without running anything; it says what is wrong, or "".
func parseCommand(args []string) string {
	root := newRootCommand(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err.Error()
	}
	if cmd == root {
		return "no such command: the commands are " + strings.Join(commandNames(root), ", ")
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return "deployflow " + cmd.Name() + ": " + err.Error()
	}
	return ""
}

// checkSynopsis checks a line such as
//
//	deployflow pause|resume|abort <lease> <service>  # ...
//
// each command it names exists, and has every --flag or -f the line shows.
func checkSynopsis(line string) []string {
	words := strings.Fields(stripComment(line))
	if len(words) < 2 {
		return []string{"names no command"}
	}
	flagRe := regexp.MustCompile(`^--?[a-z][a-z0-9-]*$`)
	var flags []string
	for _, w := range words[2:] {
		for _, part := range strings.Split(strings.Trim(w, "[]()"), "|") {
			if f := strings.Trim(part, "[]()"); flagRe.MatchString(f) {
				flags = append(flags, strings.TrimLeft(f, "-"))
			}
		}
	}
	var problems []string
	for _, name := range strings.Split(words[1], "|") {
		root := newRootCommand(io.Discard, io.Discard)
		cmd, _, err := root.Find([]string{name})
		if err != nil || cmd == root {
			problems = append(problems, "no command "+name+": the commands are "+strings.Join(commandNames(root), ", "))
			continue
		}
		for _, f := range flags {
			found := cmd.Flags().Lookup(f)
			if found == nil && len(f) == 1 {
				found = cmd.Flags().ShorthandLookup(f)
			}
			if found == nil {
				found = cmd.InheritedFlags().Lookup(f)
			}
			if found == nil {
				problems = append(problems, "deployflow "+name+" has no flag "+f)
			}
		}
	}
	return problems
}

func commandNames(root *cobra.Command) []string {
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	return names
}

type docLine struct {
	text string
	n    int
}

type fencedBlock struct {
	lang  string
	lines []docLine
}

// fencedBlocks reads a Markdown file's fenced code blocks.
func fencedBlocks(t *testing.T, file string) []fencedBlock {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var (
		blocks []fencedBlock
		fence  string
		block  fencedBlock
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "" && strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.Trim(trimmed, fence[:1])) == "":
			blocks = append(blocks, block)
			fence = ""
		case fence != "":
			block.lines = append(block.lines, docLine{line, n})
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			info := strings.TrimLeft(trimmed, trimmed[:1])
			fence = trimmed[:len(trimmed)-len(info)]
			block = fencedBlock{lang: strings.TrimSpace(info)}
		}
	}
	require.NoError(t, sc.Err())
	assert.Empty(t, fence, "%s: a code block is never closed", file)
	return blocks
}

// shellWords splits a command line as sh does its words: quotes, backslash
// escapes, and a comment from an unquoted '#' at a word's start.
func shellWords(line string) ([]string, error) {
	var (
		words []string
		word  strings.Builder
		in    bool // within a word
		quote rune
	)
	runes := []rune(line)
	for i := 0; i < len(runes); i++ {
		r := runes[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case quote == '"':
			switch {
			case r == '"':
				quote = 0
			case r == '\\' && i+1 < len(runes) && strings.ContainsRune(`"\$`+"`", runes[i+1]):
				i++
				word.WriteRune(runes[i])
			default:
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == '\\' && i+1 < len(runes):
			i++
			word.WriteRune(runes[i])
			in = true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, word.String())
				word.Reset()
				in = false
			}
		case r == '#' && !in:
			i = len(runes)
		default:
			word.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, errUnclosedQuote
	}
	if in {
		words = append(words, word.String())
	}
	return words, nil
}

var errUnclosedQuote = errors.New("a quote is never closed")

// stripComment drops a "  # ..." comment from a synopsis line.
func stripComment(line string) string {
	if i := strings.Index(line, " #"); i >= 0 {
		return line[:i]
	}
	return line
}

// The docs checker itself: words split as sh splits them, and a wrong flag,
// command or synopsis is caught.
func TestTheDocsCommandCheckerCatchesMistakes(t *testing.T) {
	words, err := shellWords(`bin/deployflow schedule create demo-shop --cron "0 3 * * *" --action 'restart' a\ b  # a comment`)
	require.NoError(t, err)
	assert.Equal(t, []string{"bin/deployflow", "schedule", "create", "demo-shop", "--cron", "0 3 * * *", "--action", "restart", "a b"}, words)
	_, err = shellWords(`deployflow deploy -f "x.yaml`)
	assert.Error(t, err)

	assert.Empty(t, parseCommand([]string{"deploy", "-f", "m.yaml", "--wait", "--timeout", "5m"}))
	assert.Contains(t, parseCommand([]string{"deploy", "-f", "m.yaml", "--wiat"}), "unknown flag: --wiat")
	assert.Contains(t, parseCommand([]string{"redeploy", "demo-shop"}), "no such command")
	assert.Empty(t, checkSynopsis("deployflow pause|resume|abort <lease> <service>  # a rollout in progress"))
	assert.Equal(t, []string{"deployflow status has no flag follow"}, checkSynopsis("deployflow status <lease> [--follow]"))
}
