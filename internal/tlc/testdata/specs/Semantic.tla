---- MODULE Semantic ----
\* An unknown operator: SANY parses it but rejects it.
EXTENDS Naturals
VARIABLE x
Init == x = Undefined
Next == x' = x
====
