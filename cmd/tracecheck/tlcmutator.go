package main

import "github.com/threadclaim/threadclaim/tlc"

// diffMutator is the mutator the differential uses.
var diffMutator tlc.Mutator = tlc.LocalMutate
