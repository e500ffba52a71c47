package stdio

// HighWater is the most output b held at once.
func HighWater(b *Budget) int64 { return b.b.HighWater() }
