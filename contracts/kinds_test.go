package contracts

import (
	"os"
	"testing"
)

// TestMain registers the built-in step kinds' contract halves, as package
// steps does for a program (steps.Kinds): these tests cannot import steps,
// which imports contracts.
func TestMain(m *testing.M) {
	for _, k := range []StepKind{BashStep, ShStep, HTTPStep, TCPStep} {
		RegisterStepKind(k)
	}
	os.Exit(m.Run())
}

// A fence whose language names no registered kind says which kinds there
// are; a program that registered none (it does not import package steps)
// is told so instead of being offered an empty list.
func TestUnknownStepKind(t *testing.T) {
	if got, want := unknownStepKind("python"), `unknown step kind "python" (want bash, sh, http or tcp)`; got != want {
		t.Errorf("registered kinds: got %q, want %q", got, want)
	}
	kinds, names := stepKinds, stepKindNames
	stepKinds, stepKindNames = map[string]*StepKind{}, nil
	defer func() { stepKinds, stepKindNames = kinds, names }()
	if got, want := unknownStepKind("bash"), `unknown step kind "bash" (no step kinds are registered: a program that reads contracts imports package steps)`; got != want {
		t.Errorf("no kinds: got %q, want %q", got, want)
	}
}
