---- MODULE Slow ----
\* A state space too big to finish: the driver's tests cancel it.
EXTENDS Naturals
VARIABLES x, y
Init == x = 0 /\ y = 0
Next == \/ x' = x + 1 /\ UNCHANGED y
        \/ y' = y + 1 /\ UNCHANGED x
====
