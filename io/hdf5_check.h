// The HDF5 error idiom shared by io/hdf5*.cpp (not part of the io API: it
// includes <hdf5.h>). H5_CHECK is base/error.h's idiom as the one check for HDF5 calls: a
// negative return throws the caller's context, the call, and HDF5's reason.
#pragma once
#include <hdf5.h>

#include <string>

#include "base/error.h"

namespace eng::h5 {
// HDF5 prints its error stack to stderr by default; the thread-safe build
// keeps that switch per thread, so every thread that calls in turns it off.
void quiet();
// The innermost message on this thread's HDF5 error stack ("truncated file:
// eof = ...", "object 'x' doesn't exist"): the reason, without the stack.
std::string h5_reason();
}  // namespace eng::h5

// A failing HDF5 call is about the user's file (damaged, unreadable, a full
// disk when writing): a UserError, without a source location.
#define H5_CHECK(call, ...)                                                                                    \
  do {                                                                                                         \
    if ((call) < 0) ENGINE_USER_FAIL(::eng::cat(__VA_ARGS__), " (", #call, ": ", ::eng::h5::h5_reason(), ")"); \
  } while (0)
