// Package pushstate holds the delivery state of a push notification config
// as the push stage computes it (push.Store.Deliveries) and the console
// shows it (console.PushView). It imports nothing of the pipeline, so the
// console can name the type without importing the push stage, whose A2A
// SDK dependencies would follow it into egress.
package pushstate
