package contracts

import (
	"fmt"
	"strings"
)

// StepKind is the contract side of a step kind: what the fence's language
// names (```http {id=…}), how the block becomes a Step, what lint checks
// of it and how explain shows it. The built-in kinds' halves are BashStep,
// ShStep (execstep.go), HTTPStep (httpstep.go) and TCPStep (tcpstep.go);
// package steps pairs each with how it runs (steps.Kinds) and registers
// them, so a program that reads contracts imports package steps.
type StepKind struct {
	// Name is the fence's language, and the step's Kind.
	Name string
	// Shell names the shell that runs an exec kind's script, through the
	// transport of the step's target (on=, else the stage's); "" for a
	// kind the engine probes itself, from its own host or from an ssh
	// target through via=.
	Shell string
	// Parse reads the block into the step, which already holds its
	// attributes and the block's text as its Script; nil keeps the text
	// as the script.
	Parse func(blk *StepBlock, st *Step)
	// Filled returns the texts of the step the run fills with values (see
	// package fill), so lint can fill them with the values known at load;
	// nil, or no texts, for a kind that fills none (an exec kind's script
	// reads its values as shell variables).
	Filled func(st *Step) []string
	// Fill fills those texts with vals as the run does and returns the
	// first error the run would meet.
	Fill func(st *Step, vals map[string]string) error
	// Command is the step as explain shows it; nil shows its script.
	Command func(st *Step) string
	// Expected is the field an `Expected:` line below the step judges;
	// "" means stdout.
	Expected string
	// JSON marks a kind whose output may be read as JSON without
	// as=json (an http answer with a JSON content type): its fields are
	// the author's to declare (an example block or fields=).
	JSON bool
	// Values are what every step of the kind produces, by name: what its
	// table's fields, cells and its stage's conditions may read. Lint,
	// explain, the docs' tables, replay and the run all read them.
	Values []Value
	// As are the forms of as= a step of the kind may take (none: as= is
	// refused), each with the values it adds.
	As []AsForm
	// Verdict marks a kind that judges its own steps without a table (a
	// plugin whose exit status is its verdict): lint does not ask for a
	// table below its steps.
	Verdict bool
	// VerdictDoc says, for explain, how a Verdict kind judges its steps.
	VerdictDoc string
	// Words are, by value name, the only words a string value of the
	// kind is ever (a plugin's status: OK, WARNING, CRITICAL, UNKNOWN):
	// lint refuses a comparison with another word, which never holds.
	Words map[string][]string
	// Reported are values every step of the kind keeps in its report
	// beside those its table reads (a plugin's status line and perfdata),
	// so a step judged without a table still shows what it saw.
	Reported []string
	// Dials marks a kind the engine probes over the network (http, tcp):
	// via= tunnels its probe through an ssh target. Any other kind
	// refuses via=.
	Dials bool
	// FieldsRequired marks a kind whose JSON output must be declared
	// (fields= or an example block): a step of the kind without a
	// declaration is an error, since its output is checked against it
	// (an agent's report).
	FieldsRequired bool
}

// Exec reports whether the kind's step is a script run by a shell
// through a transport.
func (k *StepKind) Exec() bool { return k.Shell != "" }

// StepBlock is a step's fenced block as its kind's Parse reads it.
type StepBlock struct {
	// Text is the block's text, its lines joined by \n (a CRLF file's too).
	Text string
	b    *bodyParser
	tm   textMap
	at   Pos
}

// Errorf reports an error at the block's opening fence.
func (blk *StepBlock) Errorf(format string, args ...any) {
	blk.b.d.errorf(blk.at, format, args...)
}

// ErrorfAt reports an error at byte off of Text.
func (blk *StepBlock) ErrorfAt(off int, format string, args ...any) {
	blk.b.d.errorf(blk.b.s.pos(blk.tm.fileOff(off)), format, args...)
}

// Refs checks the ${name} references in s, the text at byte off of Text,
// as the engine will fill them (package fill): each must name a var, a
// secret or an item key of a for_each stage, and a shell expansion
// (${name:-x}) is an error, reported at its column. It returns s as
// written; the run fills it.
func (blk *StepBlock) Refs(s string, off int) string {
	return blk.b.refs(s, blk.tm, off)
}

// stepKinds are the registered kinds by name; stepKindNames keeps the
// order they were registered in, which error messages list them in. Both
// are written only by RegisterStepKind, from init functions.
var (
	stepKinds     = map[string]*StepKind{}
	stepKindNames []string
)

// RegisterStepKind makes the parser, lint and explain know a step kind.
// Package steps calls it from an init function for every kind it lists;
// it is not safe to call once contracts are being read. It panics on an
// empty or duplicate name.
func RegisterStepKind(k StepKind) {
	if k.Name == "" {
		panic("contracts: a step kind without a name")
	}
	if _, dup := stepKinds[k.Name]; dup {
		panic("contracts: duplicate step kind " + k.Name)
	}
	stepKinds[k.Name] = &k
	stepKindNames = append(stepKindNames, k.Name)
}

// StepKindNames names the registered step kinds, in the order they were
// registered (the order error messages list them in).
func StepKindNames() []string { return append([]string(nil), stepKindNames...) }

// stepKind returns the registered kind of that name, or nil.
func stepKind(name string) *StepKind { return stepKinds[name] }

// isExecKind reports whether name is a registered exec kind.
func isExecKind(name string) bool {
	k := stepKind(name)
	return k != nil && k.Exec()
}

// isProbeKind reports whether name is a registered kind the engine probes
// itself.
func isProbeKind(name string) bool {
	k := stepKind(name)
	return k != nil && !k.Exec()
}

// stepKindList names the registered kinds, exec kinds or the others, in
// the order they were registered, joined as prose: "http or tcp".
func stepKindList(exec bool, conj string) string {
	return kindList(func(k *StepKind) bool { return k.Exec() == exec }, conj)
}

// kindList names the registered kinds for which want holds, in the order
// they were registered, joined as prose.
func kindList(want func(*StepKind) bool, conj string) string {
	var names []string
	for _, n := range stepKindNames {
		if want(stepKinds[n]) {
			names = append(names, n)
		}
	}
	return joinWords(names, conj)
}

// dialingKinds names the kinds that take via=, joined as prose.
func dialingKinds(conj string) string {
	return kindList(func(k *StepKind) bool { return k.Dials }, conj)
}

// unknownStepKind is the error for a fence whose language names no kind.
func unknownStepKind(kind string) string {
	if len(stepKindNames) == 0 {
		return fmt.Sprintf("unknown step kind %q (no step kinds are registered: a program that reads contracts imports package steps)", kind)
	}
	return fmt.Sprintf("unknown step kind %q (want %s)%s", kind, joinWords(stepKindNames, "or"), hint(kind, stepKindNames, ""))
}

// article is the indefinite article before a kind's name: "an agent
// step", "a bash step".
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an"
	}
	return "a"
}

// joinWords joins words as prose: "a", "a or b", "a, b or c".
func joinWords(words []string, conj string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " " + conj + " " + words[len(words)-1]
}
