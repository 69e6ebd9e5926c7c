---- MODULE Lasso ----
\* With fairness x cycles 0, 1, 2 forever and never reaches 5: the
\* temporal property Reaches is violated by a lasso (back to state 1).
EXTENDS Naturals
VARIABLE x
Init == x = 0
Next == x' = (x + 1) % 3
Spec == Init /\ [][Next]_x /\ WF_x(Next)
Reaches == <>(x = 5)
====
