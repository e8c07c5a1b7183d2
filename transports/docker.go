package transports

import (
	"github.com/contractd/contractd/transports/addr"
)

// dockerKind runs scripts inside a running container with `docker exec -i
// CONTAINER sh -s` on its parent (the engine's host, or an ssh link). The
// default shell is sh, which every image with a shell has; Command.Shell
// "bash" asks for bash and falls back to sh where it is absent. docker's
// own failures (exit 125: no such container, not running, daemon down;
// 126/127: no shell in the image) happen before our shell starts and are
// reported as ErrUnreachable with docker's message.
var dockerKind = Kind{
	Name:    "docker",
	Doc:     "a Docker container, through `docker exec -i CONTAINER` on the engine's host or the ssh host via names",
	Value:   ValueString,
	Example: "agent-zero",
	Address: func(v string, s *Spec) error {
		if err := addr.Container(v); err != nil {
			return err
		}
		s.Addr = v
		return nil
	},
	Via:     ViaOptional,
	Wrap:    func(s *Spec) []string { return []string{"docker", "exec", "-i", s.Addr} },
	Shell:   "sh",
	SudoHop: true,
}
