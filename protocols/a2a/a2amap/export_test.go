package a2amap

// Misses is how many MarshalTask calls of b fell back to marshaling the
// task whole.
func Misses(b *TaskBuilder) int { return b.misses }
