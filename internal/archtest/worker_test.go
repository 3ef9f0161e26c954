package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWorkerLibraryStandsAlone: worker/ is what users import into their own
// programs, so it must not pull the server in. Its dependencies may be the
// standard library, go-redis and client_golang, never a package of this
// module.
func TestWorkerLibraryStandsAlone(t *testing.T) {
	cmd := exec.Command("go", "list", "-f", "{{join .Deps \"\\n\"}}", "./worker")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr(err))
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list gave worker/ no dependencies at all")
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, module+"/") {
			t.Errorf("worker/ depends on %s", dep)
		}
	}
}
