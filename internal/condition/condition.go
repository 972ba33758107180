// Package condition is the language of an analysis's successCondition and
// failureCondition (issue 20.1): data over one number, `result`, never a
// program. A condition is written in expr-lang syntax, as Argo Rollouts'
// are ("result < 0.05"), but only comparisons, arithmetic, boolean logic,
// the ternary, number literals, `result` and a few pure math functions are
// accepted, and its length is bounded: no strings, arrays, maps, ranges,
// closures, member access, variables, time, or any other builtin. So a
// condition cannot allocate, loop, read the clock or take more than a few
// hundred steps, and judging it gives the same answer every time.
//
// Conditions are judged by the activity that measures (internal/analysis),
// never inside workflow code: the recorded verdict is what replays.
package condition

import (
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// MaxLength is the longest condition, in bytes.
const MaxLength = 256

// maxNodes bounds a condition's syntax tree (MaxLength bounds it already;
// this keeps the compiler's own budget small too).
const maxNodes = 128

// Functions are the functions a condition may call: pure, over numbers.
var Functions = []string{"abs", "ceil", "floor", "round", "min", "max"}

// operators a condition may use.
var operators = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "**": true, "^": true,
	"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true,
	"&&": true, "||": true, "and": true, "or": true, "!": true, "not": true,
}

// Condition is a compiled condition.
type Condition struct {
	src     string
	program *vm.Program
}

// Compile checks cond and compiles it. Its error says what is not allowed
// and what is, for the manifest's validation to name the field with.
func Compile(cond string) (*Condition, error) {
	if len(cond) > MaxLength {
		return nil, fmt.Errorf("is %d bytes long: a condition is at most %d (a comparison over result, like \"result < 0.05\")", len(cond), MaxLength)
	}
	if strings.TrimSpace(cond) == "" {
		return nil, fmt.Errorf("is empty: write a comparison over result, like \"result < 0.05\"")
	}
	tree, err := parser.Parse(cond)
	if err != nil {
		return nil, fmt.Errorf("does not parse: %s", firstLine(err.Error()))
	}
	v := &allowed{}
	ast.Walk(&tree.Node, v)
	if v.err != nil {
		return nil, v.err
	}
	opts := []expr.Option{expr.Env(map[string]any{"result": 0.0}), expr.AsBool(), expr.DisableAllBuiltins(), expr.MaxNodes(maxNodes)}
	for _, f := range Functions {
		opts = append(opts, expr.EnableBuiltin(f))
	}
	p, err := expr.Compile(cond, opts...)
	if err != nil {
		if strings.Contains(err.Error(), "expected bool") {
			return nil, fmt.Errorf("is a number, not true or false: compare it, like \"result < 0.05\"")
		}
		return nil, fmt.Errorf("%s", firstLine(err.Error()))
	}
	return &Condition{src: cond, program: p}, nil
}

// Check reports whether cond is an allowed condition.
func Check(cond string) error {
	_, err := Compile(cond)
	return err
}

// Holds judges the condition for result.
func (c *Condition) Holds(result float64) (bool, error) {
	out, err := expr.Run(c.program, map[string]any{"result": result})
	if err != nil {
		return false, fmt.Errorf("%q: %s", c.src, firstLine(err.Error()))
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("%q is %v, not true or false", c.src, out)
	}
	return b, nil
}

// allowed walks a parsed condition and keeps the first node it refuses.
type allowed struct{ err error }

func (v *allowed) Visit(node *ast.Node) {
	if v.err != nil {
		return
	}
	refuse := func(what string) {
		v.err = fmt.Errorf("%s is not allowed: a condition is a comparison over result with numbers, arithmetic (+ - * / **), and/or/not and %s()", what, strings.Join(Functions, "(), "))
	}
	switch n := (*node).(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.ConditionalNode:
	case *ast.IdentifierNode:
		if n.Value != "result" && !isFunction(n.Value) {
			refuse(fmt.Sprintf("the name %q", n.Value))
		}
	case *ast.UnaryNode:
		if !operators[n.Operator] {
			refuse(fmt.Sprintf("the operator %q", n.Operator))
		}
	case *ast.BinaryNode:
		if !operators[n.Operator] {
			refuse(fmt.Sprintf("the operator %q", n.Operator))
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok || !isFunction(id.Value) {
			refuse(fmt.Sprintf("calling %s", ast.Node(n).String()))
		}
	case *ast.BuiltinNode:
		if !isFunction(n.Name) {
			refuse(fmt.Sprintf("the function %s()", n.Name))
		}
	case *ast.StringNode, *ast.BytesNode:
		refuse("a string")
	case *ast.ArrayNode, *ast.MapNode, *ast.PairNode, *ast.SliceNode:
		refuse("a list or map")
	case *ast.MemberNode, *ast.ChainNode:
		refuse("member access")
	case *ast.PredicateNode, *ast.PointerNode:
		refuse("a closure")
	case *ast.VariableDeclaratorNode, *ast.SequenceNode:
		refuse("a variable or sequence")
	default:
		refuse(fmt.Sprintf("%T", n))
	}
}

func isFunction(name string) bool {
	for _, f := range Functions {
		if f == name {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
