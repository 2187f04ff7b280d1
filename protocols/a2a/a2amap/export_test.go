package a2amap

// Misses is how many MarshalV03Task calls of b fell back to marshaling the
// task whole.
func Misses(b *TaskBuilder) int { return b.misses }
