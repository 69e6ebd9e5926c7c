---- MODULE Parse ----
\* A syntax error: SANY cannot parse it.
EXTENDS Naturals
VARIABLE x
Init == x = 0 /\
Next == x' = 
====
