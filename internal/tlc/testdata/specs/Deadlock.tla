---- MODULE Deadlock ----
\* A behaviour that stops at x = 2 with deadlock checking on: TLC reports a deadlock.
EXTENDS Naturals
VARIABLE x
Init == x = 0
Next == x < 2 /\ x' = x + 1
====
