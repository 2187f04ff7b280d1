package a2av1

import "testing"

// TestPathTenantSplit: which HTTP+JSON paths carry a `/{tenant}` prefix.
func TestPathTenantSplit(t *testing.T) {
	for _, c := range []struct{ path, tenant, route string }{
		{"/a2a/v1/message:send", "", "/a2a/v1/message:send"},
		{"/a2a/v1/tasks/t-1", "", "/a2a/v1/tasks/t-1"},
		{"/a2a/v1/tasks/t-1:subscribe", "", "/a2a/v1/tasks/t-1:subscribe"},
		{"/a2a/v1/tasks/tasks", "", "/a2a/v1/tasks/tasks"},
		{"/a2a/v1/extendedAgentCard", "", "/a2a/v1/extendedAgentCard"},
		{"/a2a/v1/echo/message:send", "echo", "/a2a/v1/message:send"},
		{"/a2a/v1/echo/message:stream", "echo", "/a2a/v1/message:stream"},
		{"/a2a/v1/echo/tasks", "echo", "/a2a/v1/tasks"},
		{"/a2a/v1/echo/tasks/t-1:cancel", "echo", "/a2a/v1/tasks/t-1:cancel"},
		{"/a2a/v1/echo/tasks/t-1/pushNotificationConfigs/c-1", "echo", "/a2a/v1/tasks/t-1/pushNotificationConfigs/c-1"},
		{"/a2a/v1/echo/extendedAgentCard", "echo", "/a2a/v1/extendedAgentCard"},
		{"/a2a/v1/echo/nothing:here", "", "/a2a/v1/echo/nothing:here"},
		{"/a2a/v1/echo/", "", "/a2a/v1/echo/"},
		{"/a2a/v1/echo", "", "/a2a/v1/echo"},
		{"/a2a/v1//message:send", "", "/a2a/v1//message:send"},
		{"/a2a/v1/a/b/message:send", "", "/a2a/v1/a/b/message:send"},
		{"/other/echo/message:send", "", "/other/echo/message:send"},
	} {
		tenant, route := pathTenant(c.path)
		if tenant != c.tenant || route != c.route {
			t.Errorf("pathTenant(%q) = %q, %q; want %q, %q", c.path, tenant, route, c.tenant, c.route)
		}
	}
}
