# Third-party dependencies, all from Debian packages (scripts/setup.sh installs
# them). Each find_package failure says which package to install.
set(BLA_VENDOR OpenBLAS)
find_package(BLAS)
if(NOT BLAS_FOUND)
  message(FATAL_ERROR "OpenBLAS not found: run scripts/setup.sh (Debian package libopenblas-dev)")
endif()
# Prefer Debian's OpenMP build of OpenBLAS: it shares libgomp's thread pool
# with our OpenMP loops. The default pthread build keeps its own spinning
# threads, and on 2 cores the two pools fight (measured: ~1/3 of a GPT-2 step
# lost in sched_yield). The build RPATH points the loader at this copy.
find_library(OPENBLAS_OPENMP_LIBRARY NAMES libopenblas.so.0
             PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
if(OPENBLAS_OPENMP_LIBRARY)
  set(BLAS_LIBRARIES ${OPENBLAS_OPENMP_LIBRARY})
  message(STATUS "OpenBLAS: OpenMP build ${OPENBLAS_OPENMP_LIBRARY}")
else()
  message(STATUS "OpenBLAS: ${BLAS_LIBRARIES} (install libopenblas0-openmp to share OpenMP's threads)")
endif()
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread)
if(NOT CBLAS_INCLUDE_DIR)
  message(FATAL_ERROR "cblas.h not found: run scripts/setup.sh (Debian package libopenblas-dev)")
endif()

find_package(OpenMP REQUIRED COMPONENTS CXX)

find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "nlohmann_json not found: run scripts/setup.sh (Debian package nlohmann-json3-dev)")
endif()

# MPI starts and connects the processes of a distributed run (comm/). Found
# like CUDA: AUTO uses it when present, ON requires it, OFF builds an engine
# whose world is always one process (the NCCL backend still runs on it).
set(ENGINE_MPI AUTO CACHE STRING "Build with MPI: AUTO (if found), ON or OFF")
set_property(CACHE ENGINE_MPI PROPERTY STRINGS AUTO ON OFF)
set(ENGINE_HAVE_MPI OFF)
if(NOT ENGINE_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
  if(MPI_C_FOUND)
    set(ENGINE_HAVE_MPI ON)
    find_program(ENGINE_MPIEXEC NAMES mpirun mpiexec)
    message(STATUS "MPI: ${MPI_C_LIBRARY_VERSION_STRING}")
  elseif(ENGINE_MPI STREQUAL "ON")
    message(FATAL_ERROR "ENGINE_MPI=ON but MPI was not found: run scripts/setup.sh (Debian packages libopenmpi-dev openmpi-bin)")
  else()
    message(STATUS "MPI not found: every run is a world of one process")
  endif()
endif()

find_package(HDF5 QUIET COMPONENTS C)
if(NOT HDF5_FOUND)
  message(FATAL_ERROR "HDF5 not found: run scripts/setup.sh (Debian package libhdf5-dev)")
endif()

# zlib decompresses the Fashion-MNIST IDX files (models/vit/prepare_fashion_mnist).
find_package(ZLIB QUIET)
if(NOT ZLIB_FOUND)
  message(FATAL_ERROR "zlib not found: run scripts/setup.sh (Debian package zlib1g-dev)")
endif()

if(ENGINE_TESTS)
  find_package(Catch2 2 QUIET)
  if(NOT Catch2_FOUND)
    message(FATAL_ERROR "Catch2 not found: run scripts/setup.sh (Debian package catch2)")
  endif()
endif()
