package searchattr

import (
	"context"
	"fmt"
	"sort"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
)

// types are the attributes' indexed value types.
var types = map[string]enumspb.IndexedValueType{
	Lease.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	Owner.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	Services.GetName():  enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
	Phase.GetName():     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	Revision.GetName():  enumspb.INDEXED_VALUE_TYPE_INT,
	Trigger.GetName():   enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	Namespace.GetName(): enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

// Missing lists deployflow's attributes that namespace ns lacks, or has
// with another type, as name=Type.
func Missing(ctx context.Context, ops operatorservice.OperatorServiceClient, ns string) ([]string, error) {
	resp, err := ops.ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("list the search attributes of Temporal namespace %s: %w", ns, err)
	}
	var out []string
	for name, want := range types {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != want {
			out = append(out, name+"="+typeName(want))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Register adds the missing attributes to namespace ns.
func Register(ctx context.Context, ops operatorservice.OperatorServiceClient, ns string, missing []string) error {
	add := map[string]enumspb.IndexedValueType{}
	for _, m := range missing {
		name, _, _ := strings.Cut(m, "=")
		add[name] = types[name]
	}
	_, err := ops.AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: add})
	return err
}

// CreateCommand is the `temporal` command that registers missing.
func CreateCommand(ns string, missing []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "temporal operator search-attribute create --namespace %s", ns)
	for _, m := range missing {
		name, typ, _ := strings.Cut(m, "=")
		fmt.Fprintf(&b, " --name %s --type %s", name, typ)
	}
	return b.String()
}

func typeName(t enumspb.IndexedValueType) string {
	switch t {
	case enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST:
		return "KeywordList"
	case enumspb.INDEXED_VALUE_TYPE_INT:
		return "Int"
	default:
		return "Keyword"
	}
}
