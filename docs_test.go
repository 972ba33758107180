package deployflow_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 34.5: the README is a front page and docs/ is the manual, one page
// per topic. These tests keep the two true the way the walk, layer and
// gate tables are kept true: the README stays short, every page is
// reachable from it, every link lands, and every `make` target shown runs.
// (starter's TestEveryCommandInTheDocsParses does the same for the CLI's
// command lines.)

const maxReadmeLines = 300

func TestTheReadmeIsAFrontPage(t *testing.T) {
	readme := readDoc(t, "README.md")
	lines := strings.Count(readme.text, "\n")
	assert.LessOrEqual(t, lines, maxReadmeLines,
		"README.md has %d lines, more than %d: it is the front page; move the detail to a page of docs/ and link it", lines, maxReadmeLines)

	// The set-up commands: the first code block under "## Set up" is
	// exactly `make demo`, then `make test`.
	var setUp *codeBlock
	for i, b := range readme.blocks {
		if b.section == "Set up" {
			setUp = &readme.blocks[i]
			break
		}
	}
	require.NotNil(t, setUp, "README.md has no code block under a \"## Set up\" heading: it shows the two commands a fresh machine needs, make demo then make test")
	var commands []string
	for _, line := range setUp.lines {
		if c := strings.TrimSpace(stripShellComment(line)); c != "" {
			commands = append(commands, c)
		}
	}
	assert.Equal(t, []string{"make demo", "make test"}, commands,
		"README.md's set-up block (its first code block under \"## Set up\") shows exactly `make demo`, then `make test`")
}

func TestEveryDocsPageIsLinkedFromTheReadme(t *testing.T) {
	readme := readDoc(t, "README.md")
	linked := map[string]bool{}
	for _, l := range readme.links {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.Clean(path)] = true
	}
	pages := docsPages(t)
	require.NotEmpty(t, pages, "docs/ has no pages")
	for _, page := range pages {
		assert.True(t, linked[page], "%s is not linked from README.md: add it to the README's \"Documentation\" table", page)

		d := readDoc(t, page)
		assert.True(t, strings.HasPrefix(d.text, "# "), "%s does not start with a \"# \" title", page)
		back := false
		for _, l := range d.links {
			path, _, _ := strings.Cut(l.target, "#")
			back = back || filepath.Clean(filepath.Join("docs", path)) == "README.md"
		}
		assert.True(t, back, "%s has no link back to the README (../README.md)", page)
	}
}

func TestEveryLinkInTheDocsResolves(t *testing.T) {
	files := append([]string{"README.md"}, docsPages(t)...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		a := map[string]bool{}
		for _, h := range readDoc(t, file).headings {
			a[h] = true
		}
		anchors[file] = a
		return a
	}
	checked := 0
	for _, file := range files {
		for _, l := range readDoc(t, file).links {
			if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(l.target) {
				continue // http:, https:, mailto:
			}
			checked++
			path, fragment, hasFragment := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Clean(filepath.Join(filepath.Dir(file), path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: the link %q points to %s, which does not exist: fix the path (relative to %s)", file, l.line, l.target, target, filepath.Dir(file))
					continue
				}
			}
			if !hasFragment {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: the link %q has an anchor into %s, which is not a Markdown page", file, l.line, l.target, target)
				continue
			}
			if !anchorsOf(target)[fragment] {
				t.Errorf("%s:%d: the link %q: %s has no heading whose anchor is #%s; its anchors: %s",
					file, l.line, l.target, target, fragment, strings.Join(sortedKeys(anchorsOf(target)), ", "))
			}
		}
	}
	require.Greater(t, checked, 20, "the README's and docs' relative links were read")
}

func TestEveryMakeTargetInTheDocsIsInTheMakefile(t *testing.T) {
	targets := makeTargets(t)
	// make, its variables (VAR=value) and options, then the target.
	re := regexp.MustCompile(`(?:^|[\s;&|(])make((?:\s+-[A-Za-z-]+)*(?:\s+[A-Za-z_][A-Za-z0-9_]*=(?:"[^"]*"|'[^']*'|\S+))*)\s+([A-Za-z0-9][A-Za-z0-9_.-]*)`)
	seen := 0
	for _, file := range append([]string{"README.md"}, docsPages(t)...) {
		d := readDoc(t, file)
		var code []string
		for _, b := range d.blocks {
			code = append(code, strings.Join(b.lines, "\n"))
		}
		code = append(code, d.inlineCode...)
		for _, c := range code {
			for _, m := range re.FindAllStringSubmatch(c, -1) {
				seen++
				assert.True(t, targets[m[2]], "%s shows `make %s`, but the Makefile has no target %q: fix the command or add the target", file, m[2], m[2])
			}
		}
	}
	require.Greater(t, seen, 10, "the docs' make commands were read")
}

// doc is a Markdown file as these tests read it.
type doc struct {
	text       string
	blocks     []codeBlock
	inlineCode []string // the `code spans` outside fenced blocks
	links      []link   // [text](target) outside code
	headings   []string // the anchors of its headings, as GitHub makes them
}

type codeBlock struct {
	lang, section string // the info string; the "## " section it is in
	lines         []string
}

type link struct {
	target string
	line   int
}

var (
	inlineCodeRe = regexp.MustCompile("`[^`]+`")
	linkRe       = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRe    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

func readDoc(t *testing.T, file string) doc {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	d := doc{text: string(b)}
	var (
		fence   string
		block   *codeBlock
		prose   []string // prose, code blocks blanked, to find code spans across lines
		section string
		seen    = map[string]int{}
	)
	sc := bufio.NewScanner(strings.NewReader(d.text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.Trim(trimmed, fence[:1])) == "" {
				d.blocks = append(d.blocks, *block)
				fence, block = "", nil
			} else {
				block.lines = append(block.lines, line)
			}
			prose = append(prose, "")
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			info := strings.TrimLeft(trimmed, trimmed[:1])
			fence = trimmed[:len(trimmed)-len(info)]
			block = &codeBlock{lang: strings.TrimSpace(info), section: section}
			prose = append(prose, "")
			continue
		}
		prose = append(prose, line)
		if m := headingRe.FindStringSubmatch(line); m != nil {
			if m[1] == "##" {
				section = m[2]
			}
			slug := slugOf(m[2])
			if k := seen[slug]; k > 0 {
				seen[slug]++
				slug = slug + "-" + strconv.Itoa(k)
			} else {
				seen[slug] = 1
			}
			d.headings = append(d.headings, slug)
		}
		for _, m := range linkRe.FindAllStringSubmatch(inlineCodeRe.ReplaceAllString(line, "code"), -1) {
			d.links = append(d.links, link{target: m[1], line: n})
		}
	}
	require.NoError(t, sc.Err())
	require.Empty(t, fence, "%s: a code block is never closed", file)
	// Code spans may wrap across lines within a paragraph.
	for _, m := range inlineCodeRe.FindAllString(strings.Join(prose, "\n"), -1) {
		if !strings.Contains(m, "\n\n") { // a stray backtick, not a span
			d.inlineCode = append(d.inlineCode, strings.Trim(m, "`"))
		}
	}
	return d
}

// slugOf is the anchor GitHub gives a heading: lower case, spaces to '-',
// punctuation other than '-' and '_' dropped (backticks included).
func slugOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func docsPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	return pages
}

// makeTargets reads the Makefile's rules' targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("Makefile")
	require.NoError(t, err)
	defer f.Close()
	rule := regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*::?(?:[^=]|$)`)
	targets := map[string]bool{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if m := rule.FindStringSubmatch(sc.Text()); m != nil {
			for _, name := range strings.Fields(m[1]) {
				if !strings.HasPrefix(name, ".") {
					targets[name] = true
				}
			}
		}
	}
	require.True(t, targets["demo"] && targets["test"], "the Makefile's targets were read: %v", targets)
	return targets
}

// stripShellComment drops a shell comment: a '#' at the start of a word,
// outside quotes.
func stripShellComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
