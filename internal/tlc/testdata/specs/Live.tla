---- MODULE Live ----
\* x never reaches 5: the temporal property Reaches is violated (stuttering).
EXTENDS Naturals
VARIABLE x
Init == x = 0
Next == x' = (x + 1) % 3
Spec == Init /\ [][Next]_x
Reaches == <>(x = 5)
Inv == x < 2
====
