package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/delayd/delayd/record"
)

// TestEveryKindRegistered fails when a record kind lacks an apply or does
// not say how it reaches a rewrite, or when a registration names a kind
// record/ does not encode (record's TestEveryKindEncodes checks encode and
// decode against golden bytes).
func TestEveryKindRegistered(t *testing.T) {
	// The kinds apply's switch applies itself, read from its source, and
	// the unit, which replayRecord unframes: a new kind registers an apply
	// instead.
	direct := applySwitch(t)
	direct[record.Unit] = true
	reg := map[byte]kind{}
	timers := map[uint8]string{}
	for _, f := range features() {
		for _, k := range f.kinds {
			name := record.Name(k.op)
			if name == "" {
				t.Errorf("feature %s registers op %d, which record.Kinds does not have", f.name, k.op)
			}
			if _, ok := reg[k.op]; ok {
				t.Errorf("kind %s is registered twice", name)
			}
			reg[k.op] = k
			switch {
			case k.direct && k.apply != nil:
				t.Errorf("kind %s is direct and has an apply", name)
			case k.direct != direct[k.op]:
				t.Errorf("kind %s: direct is %v, but apply's switch says %v", name, k.direct, direct[k.op])
			case !k.direct && k.apply == nil:
				t.Errorf("kind %s has no apply", name)
			}
			switch k.rewrite {
			case rewriteUnset:
				t.Errorf("kind %s does not say how a rewrite writes it (rewriteNever if it never does)", name)
			case rewriteState:
				if f.state == nil {
					t.Errorf("kind %s is written by its feature's state, but feature %s has none", name, f.name)
				}
			}
		}
		if (f.onTimer != nil) != (f.timer != timerFree) {
			t.Errorf("feature %s: a timer kind needs its onTimer and the other way round", f.name)
		}
		if f.onTimer != nil {
			if other, ok := timers[f.timer]; ok {
				t.Errorf("timer kind %d is owned by %s and %s", f.timer, other, f.name)
			}
			timers[f.timer] = f.name
		}
	}
	for _, k := range record.Kinds {
		if _, ok := reg[k.Op]; !ok {
			t.Errorf("kind %s (op %d) has no registration in features()", k.Name, k.Op)
		}
	}
}

// applySwitch returns the record kinds named by the cases of apply's
// switch (journal.go): the kinds it applies without their registration.
func applySwitch(t *testing.T) map[byte]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "journal.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	direct := map[byte]bool{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "apply" || fn.Recv == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			cc, ok := n.(*ast.CaseClause)
			if !ok {
				return true
			}
			for _, x := range cc.List {
				sel, ok := x.(*ast.SelectorExpr)
				if !ok {
					t.Fatalf("apply: a case that is not record.<Kind>")
				}
				op, ok := opOf(sel.Sel.Name)
				if !ok {
					t.Fatalf("apply: case %s is no record kind", sel.Sel.Name)
				}
				direct[op] = true
			}
			return true
		})
	}
	if len(direct) == 0 {
		t.Fatal("apply's switch not found in journal.go")
	}
	return direct
}

// opOf maps a record constant's name (LMove) to its op.
func opOf(name string) (byte, bool) {
	for _, k := range record.Kinds {
		if strings.EqualFold(k.Name, name) {
			return k.Op, true
		}
	}
	return 0, false
}
