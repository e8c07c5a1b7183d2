package contracts

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/yuin/goldmark/parser"
)

// Options adjust how contracts load.
type Options struct {
	// Vars are --var key=value overrides; they win over the inventory and the
	// contract's own vars.
	Vars map[string]string
	// Inventory is an --inventory FILE: YAML {vars: {...}, targets: {...}}
	// whose entries override the contract's defaults (targets by name,
	// wholesale).
	Inventory string
	// MaxFileSize is the largest contract or inventory read, in bytes
	// (--max-file-size); 0 means DefaultMaxFileSize. A larger file is an
	// error diagnostic, and is not read past the limit.
	MaxFileSize int64
}

// maxFileSize returns the size limit in force.
func (o Options) maxFileSize() int64 {
	if o.MaxFileSize > 0 {
		return o.MaxFileSize
	}
	return DefaultMaxFileSize
}

// loader holds what contracts loaded together share: the parsed inventory
// and the cache of compiled expressions.
type loader struct {
	opts  Options
	inv   *inventory
	cache *exprCache
}

func newLoader(opts Options) *loader {
	l := &loader{opts: opts, cache: newExprCache()}
	if opts.Inventory != "" {
		src, err := readLimited(nil, opts.Inventory, opts.maxFileSize(), "inventory")
		if err != nil {
			l.inv = &inventory{diags: Diagnostics{readDiag(opts.Inventory, "inventory", err)}}
		} else {
			l.inv = parseInventory(opts.Inventory, src)
		}
	}
	return l
}

// LoadFile reads and parses one contract. It returns a nil Contract and
// the diagnostics (a read failure is one error diagnostic) when the file
// cannot be loaded.
func LoadFile(path string, opts Options) (*Contract, Diagnostics) {
	src, err := readLimited(nil, path, opts.maxFileSize(), "contract")
	if err != nil {
		return nil, Diagnostics{readDiag(path, "contract", err)}
	}
	l := newLoader(opts)
	return l.safeParse(newMarkdownParser(), path, src, true, false)
}

// Parse loads a contract from src; path only names it in diagnostics. It
// never panics and never half-loads: on any error it returns a nil Contract
// with every diagnostic found in one pass (warnings included). On success
// the diagnostics hold only warnings.
func Parse(path string, src []byte, opts Options) (*Contract, Diagnostics) {
	return parseText(path, src, opts, false)
}

// Draft is Parse for an editor: the same diagnostics, from the same pass,
// and the contract as far as it was read even when they hold errors, so
// hover, completion and go to definition work while the author types. A
// draft with errors is never to be run. It returns a nil Contract when
// the text was refused whole (over a size or shape limit).
func Draft(path string, src []byte, opts Options) (*Contract, Diagnostics) {
	return parseText(path, src, opts, true)
}

func parseText(path string, src []byte, opts Options, draft bool) (*Contract, Diagnostics) {
	if limit := opts.maxFileSize(); int64(len(src)) > limit {
		return nil, Diagnostics{readDiag(path, "contract", sizeError("contract", int64(len(src)), limit))}
	}
	l := newLoader(opts)
	return l.safeParse(newMarkdownParser(), path, src, false, draft)
}

// LoadMany loads contracts in parallel (bounded by GOMAXPROCS), sharing one
// cache of compiled expressions. Results are in the order of paths; a
// contract is nil when its diagnostics hold an error.
func LoadMany(paths []string, opts Options) ([]*Contract, []Diagnostics) {
	if len(paths) >= bulkLoad {
		defer raiseGC()()
	}
	l := newLoader(opts)
	out := make([]*Contract, len(paths))
	diags := make([]Diagnostics, len(paths))
	workers := min(runtime.GOMAXPROCS(0), len(paths))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			md := newMarkdownParser()
			// One read buffer per worker: the model copies every string it
			// keeps, so the buffer is free again once a file is parsed.
			var buf []byte
			for i := range next {
				src, err := readLimited(buf, paths[i], opts.maxFileSize(), "contract")
				if err != nil {
					diags[i] = Diagnostics{readDiag(paths[i], "contract", err)}
					continue
				}
				buf = src[:0]
				out[i], diags[i] = l.safeParse(md, paths[i], src, true, false)
			}
		}()
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, diags
}

// LoadDir loads the contract files of dir (ContractFiles), in name order,
// as LoadMany does. It returns an error only when dir cannot be listed.
func LoadDir(dir string, opts Options) ([]*Contract, []Diagnostics, error) {
	paths, err := ContractFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("list contracts in %s: %w", dir, err)
	}
	cs, ds := LoadMany(paths, opts)
	return cs, ds, nil
}

// ContractFiles lists the contract files directly inside dir
// (IsContractFile), in name order. A directory that does not exist holds
// none. It fails only on a malformed dir pattern.
func ContractFiles(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, fmt.Errorf("list contracts in %s: %w", dir, err)
	}
	out := paths[:0]
	for _, p := range paths {
		if IsContractFile(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// IsContractFile reports whether path names a contract file: NAME.md, not a
// dotfile, which is what editors make beside the file they edit (Emacs's
// .#NAME.md lock, a .NAME.md swap) and what a contract directory may hold
// that is not a contract.
func IsContractFile(path string) bool {
	base := filepath.Base(path)
	return strings.HasSuffix(base, ".md") && !strings.HasPrefix(base, ".")
}

// safeParse turns a parser panic into an error diagnostic, so a malformed
// file can never take the daemon down. The fuzz target calls parse directly
// so such a bug is still found. Unless draft, a contract with errors is
// nil.
func (l *loader) safeParse(md parser.Parser, path string, src []byte, owned, draft bool) (c *Contract, ds Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			c = nil
			ds = append(ds, Diagnostic{Pos: Pos{File: path, Line: 1, Col: 1}, Severity: DiagError, Msg: fmt.Sprintf("internal error while parsing: %v", r)})
		}
	}()
	c, ds = l.parse(md, path, src, owned)
	if !draft && ds.HasErrors() {
		c = nil
	}
	return c, ds
}

// parse loads one contract, returning it as far as it was read (nil only
// when the body was refused whole) with every diagnostic. owned says src
// may be modified (the front matter is blanked in place for goldmark once
// the YAML has been read).
func (l *loader) parse(md parser.Parser, path string, src []byte, owned bool) (*Contract, Diagnostics) {
	d := &diags{file: path}
	s := newSource(path, src)
	c := newContract(path)
	yamlText, yamlLine, bodyStart, closed, ok := splitFrontMatter(src)
	top := s.lineCol(1, 1)
	varPos := map[string]Pos{}
	var logPos Pos
	var reportOnlyPos []Pos
	switch {
	case !ok:
		d.errorf(top, "missing front matter: a contract starts with a --- line, YAML, then another --- line")
	case !closed:
		d.errorf(top, "front matter is not closed by a --- line")
	default:
		y := &yamlDec{s: s, lineOff: yamlLine - 1, d: d}
		if root, parsed := y.parse(yamlText); parsed {
			fm := y.decodeFrontMatter(root, c)
			if !fm.sawName {
				d.errorf(top, "missing name in front matter")
			}
			if !fm.sawRuntime {
				d.errorf(top, "missing runtime_contract: 2 in front matter")
			}
			varPos, logPos, reportOnlyPos = fm.varPos, fm.logPos, fm.reportOnlyPos
		}
	}
	c.declareVars(src)
	if l.inv != nil {
		d.list = append(d.list, l.inv.diags...)
		l.inv.nearMisses(c, d)
		for _, k := range sortedKeys(l.inv.vars) {
			overrideVar(c, d, varPos, k, l.inv.vars[k], "inventory")
		}
		for k, t := range l.inv.targets {
			c.Targets[k] = t
		}
	}
	for _, k := range sortedKeys(l.opts.Vars) {
		v := l.opts.Vars[k]
		overrideVar(c, d, varPos, k, varValue{text: v, value: v}, "--var")
	}
	if !ok {
		bodyStart = 0
	} else if !closed {
		bodyStart = len(src)
	}
	body := blankPrefix(src, bodyStart, owned)
	s.src = body // only body text is read from here on
	if e := checkMarkdownShape(body); e != nil {
		// Over a limit: goldmark never sees the text.
		d.errorf(s.lineCol(e.line, e.col), "%s", e.msg)
		sortDiagnostics(d.list)
		return nil, d.list
	}
	b := newBodyParser(s, d, c, l.cache)
	b.checkNotify()
	b.checkLog(logPos)
	b.parse(md, body)
	b.validate()
	b.checkReportOnly(reportOnlyPos)
	b.checkDependsOn()
	b.checkWindowAgents()
	b.checkExampleAgents()
	c.Defs.Vars = varPos
	sortDiagnostics(d.list)
	return c, d.list
}

// bulkLoad is the number of files from which LoadMany raises the GC target.
const bulkLoad = 64

// gcRaise coordinates raising the process's GC target across concurrent bulk
// loads: a load allocates many short-lived parse trees, and at the default
// target about a quarter of its CPU goes to collecting them (measured:
// 1,000 contracts in 0.84 s at GOGC=100, 0.63 s at 400). The knob is
// process-wide, so overlapping loads share one raise and the last one out
// restores the previous setting.
var gcRaise struct {
	mu   sync.Mutex
	n    int
	prev int
}

// raiseGC sets the GC target to 400% (unless it is already higher or off)
// and returns the func that undoes it.
func raiseGC() func() {
	gcRaise.mu.Lock()
	defer gcRaise.mu.Unlock()
	if gcRaise.n == 0 {
		gcRaise.prev = debug.SetGCPercent(400)
		if gcRaise.prev < 0 || gcRaise.prev > 400 {
			debug.SetGCPercent(gcRaise.prev) // off or already higher: leave it
		}
	}
	gcRaise.n++
	return func() {
		gcRaise.mu.Lock()
		defer gcRaise.mu.Unlock()
		if gcRaise.n--; gcRaise.n == 0 {
			debug.SetGCPercent(gcRaise.prev)
		}
	}
}
