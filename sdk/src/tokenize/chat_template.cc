#include "strata/tokenize.h"
