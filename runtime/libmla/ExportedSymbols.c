/*===- ExportedSymbols.c - libmla.so's own translation unit ---------------===*
 *
 * A shared library needs a source of its own; everything it exports comes
 * from the C interface's archive, linked whole (see CMakeLists.txt here). This
 * file checks that the header stays plain C.
 *
 *===----------------------------------------------------------------------===*/

#include "mla/mla.h"
