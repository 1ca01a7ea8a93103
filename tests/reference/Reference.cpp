// placeholder: the reference evaluator is being written (see Reference.h)
#include "reference/Reference.h"
