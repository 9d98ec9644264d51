"""What a job remembers: key groups, state descriptors and keyed state backends."""
