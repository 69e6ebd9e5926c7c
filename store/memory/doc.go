// Package memory is an in-memory core.Storage, for one process: tests,
// simulations, and programs whose runners share an address space.
//
// One lock serialises every transaction, and a lease acquire takes that
// lock as any transaction does, so a fenced write's HoldsLease stays true
// until its transaction ends. Writes change the store in place under the
// lock and are undone if the transaction fails, so a write costs O(1)
// whatever the thread's size. A holder that acquired a thread's lease
// once is refused a second acquire (core.ErrHolderReused).
//
// It passes the conformance suite (store/storetest) and is the reference
// the PostgreSQL storage is held to. Clone copies a store, so that an
// execution can be forked at any point.
package memory
