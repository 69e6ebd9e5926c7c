package tracecheck

// MutationKinds is mutationKinds, for the external tests.
var MutationKinds = mutationKinds
