package computer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/computer"
	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// namedDriver is a driver that lacks pause and volumes by design
// (sandbox.Named), as the kubernetes driver does.
type namedDriver struct{ *fakeDriver }

func (namedDriver) DriverName() string { return "kubernetes" }

// TestLacksNamesTheDriver: pause and volumes on a driver that lacks them
// by design are a 422 unsupported_by_driver naming it; on a host driver
// without them they stay 503.
func TestLacksNamesTheDriver(t *testing.T) {
	ctx := context.Background()
	for _, named := range []bool{true, false} {
		drv := &fakeDriver{}
		var d sandbox.Driver = drv
		if named {
			d = namedDriver{drv}
		}
		f := newFixtureOf(t, "", drv, d, nil)
		v, err := f.mgr.Create(ctx, f.p, computer.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		_, perr := f.mgr.Pause(ctx, f.p, v.ID)
		_, verr := f.mgr.CreateVolume(ctx, f.p, "data", 16)
		for what, err := range map[string]error{"pause": perr, "volume": verr} {
			kind, code := errdefs.Of(err)
			switch {
			case named && (kind != errdefs.FailedPrecondition || code != "unsupported_by_driver" || !strings.Contains(err.Error(), "the kubernetes driver")):
				t.Errorf("%s on a named driver: %v (%v %s)", what, err, kind, code)
			case !named && kind != errdefs.Unavailable:
				t.Errorf("%s on a host driver: %v (%v %s)", what, err, kind, code)
			}
		}
	}
}
