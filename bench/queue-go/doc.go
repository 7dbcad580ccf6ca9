// Package queuebench benchmarks client-go's workqueue and controller-runtime's
// priority queue on the same shapes as bench/rust/queue.rs (issue 8, part 1).
package queuebench
