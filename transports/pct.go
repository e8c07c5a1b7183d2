package transports

import (
	"fmt"
	"strconv"
)

// pctKind runs scripts inside a Proxmox container with `pct exec VMID --
// ...` on its parent (the Proxmox host, usually an ssh link). The script
// passes through pct's stdin; an unknown VMID or a stopped container makes
// pct fail before our shell starts, which Exec reports as ErrUnreachable
// with pct's message ("Configuration file 'nodes/NODE/lxc/VMID.conf' does
// not exist").
var pctKind = Kind{
	Name:    "pct",
	Doc:     "a Proxmox container, through `pct exec VMID --` on the Proxmox host via names",
	Value:   ValueInt,
	Example: "112",
	Address: func(v string, s *Spec) error {
		if n, err := strconv.Atoi(v); err != nil || n <= 0 {
			return fmt.Errorf("pct needs a VMID > 0, got %q", v)
		}
		s.Addr = v
		return nil
	},
	Via:     ViaRequired,
	Wrap:    func(s *Spec) []string { return []string{"pct", "exec", s.Addr, "--"} },
	SudoHop: true,
}
