package contracts

// BashStep is the contract half of the bash step kind: the block is a
// script bash runs on the step's target. Its ${name} references are shell
// variables the engine sets before it (steps.Script), so lint fills
// nothing.
var BashStep = StepKind{Name: KindBash, Shell: "bash", Values: ExecValues, As: []AsForm{AsText, AsJSON, AsLines}}

// ShStep is the contract half of the sh step kind: BashStep for a target
// without bash.
var ShStep = StepKind{Name: KindSh, Shell: "sh", Values: ExecValues, As: []AsForm{AsText, AsJSON, AsLines}}
