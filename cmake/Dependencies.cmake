# Third-party dependencies, all from Debian packages (scripts/setup.sh installs
# them). Each find_package failure says which package to install.
set(BLA_VENDOR OpenBLAS)
find_package(BLAS)
if(NOT BLAS_FOUND)
  message(FATAL_ERROR "OpenBLAS not found: run scripts/setup.sh (Debian package libopenblas-dev)")
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

find_package(MPI QUIET COMPONENTS CXX)
if(NOT MPI_CXX_FOUND)
  message(FATAL_ERROR "MPI not found: run scripts/setup.sh (Debian packages libopenmpi-dev openmpi-bin)")
endif()

find_package(HDF5 QUIET COMPONENTS C)
if(NOT HDF5_FOUND)
  message(FATAL_ERROR "HDF5 not found: run scripts/setup.sh (Debian package libhdf5-dev)")
endif()

if(ENGINE_TESTS)
  find_package(Catch2 2 QUIET)
  if(NOT Catch2_FOUND)
    message(FATAL_ERROR "Catch2 not found: run scripts/setup.sh (Debian package catch2)")
  endif()
endif()
