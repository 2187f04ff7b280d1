package ingress_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// TestA2AV1ListTasksPagesKeepTaskWhoseStatusMoves: a client pages
// through ListTasks (pageSize 1) to see every task. Between its first and
// second page, a task that was listed after the first page's task (older
// status) finishes: its status timestamp becomes the newest. With a page
// token of the last task's status timestamp alone it sorted before the
// cursor and was on no page at all (found by review); the token keeps
// the listing's start, and a task changed since comes after the others
// (cursor.go). A listing must not lose a task that exists throughout it
// (listing it again is acceptable; losing it is not).
func TestA2AV1ListTasksPagesKeepTaskWhoseStatusMoves(t *testing.T) {
	p := startPipeline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, taskA, release := gatedTask(ctx, t, p, "A: still running while the client pages")
	for _, text := range []string{"B: done", "C: done"} {
		if _, err := c.SendMessage(ctx, userMessage(text)); err != nil {
			t.Fatal(err)
		}
	}
	// Every task, listed at once before the paging starts.
	full, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var all []a2a.TaskID
	for _, tk := range full.Tasks {
		all = append(all, tk.ID)
	}
	if len(all) != 3 || !slices.Contains(all, taskA.ID) {
		t.Fatalf("ListTasks before paging: %v; want A and the two completed tasks", all)
	}

	page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tasks) != 1 || page.NextPageToken == "" || page.TotalSize != 3 {
		t.Fatalf("first page: %d tasks, token %q, total %d; want 1 task of 3 and a next page", len(page.Tasks), page.NextPageToken, page.TotalSize)
	}
	if page.Tasks[0].ID == taskA.ID {
		t.Fatalf("first page is task A (still running, the oldest status); want the newest completed task first")
	}
	seen := []a2a.TaskID{page.Tasks[0].ID}

	// Task A finishes while the client is between pages.
	close(release)
	testkit.Eventually(t, 10*time.Second, "task A completed", func() bool {
		g, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: taskA.ID})
		return err == nil && g.Status.State == a2a.TaskStateCompleted
	})
	for tok := page.NextPageToken; tok != ""; {
		page, err = c.ListTasks(ctx, &a2a.ListTasksRequest{PageSize: 1, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page.Tasks {
			seen = append(seen, tk.ID)
		}
		tok = page.NextPageToken
		if len(seen) > 10 {
			t.Fatalf("pages never end: %v", seen)
		}
	}
	for _, id := range all {
		if !slices.Contains(seen, id) {
			t.Errorf("task %s (A=%s) is on no page of a ListTasks listing (pages saw %v): a task that exists for the "+
				"whole listing must be listed on some page; task A finished between pages, its status timestamp became "+
				"the newest, and the page token (the last task's status timestamp) put it before every later page",
				id, taskA.ID, seen)
		}
	}
}
