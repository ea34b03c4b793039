# CUDA detection. ENGINE_CUDA=AUTO enables the cuda device when nvcc is found;
# ON requires it; OFF builds the CPU-only engine (no toolkit needed at all).
# Architectures default to 80;90 (A100, H100); override with
# -DCMAKE_CUDA_ARCHITECTURES=80 to build one while iterating.
set(ENGINE_HAVE_CUDA OFF)
set(ENGINE_HAVE_CUDNN OFF)
if(NOT ENGINE_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # CMake < 3.26 has no C++20 flag on record for nvcc (which has had
    # -std=c++20 since 12.0) and would reject every CUDA target.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    find_package(CUDAToolkit REQUIRED)
    foreach(lib cudart cublas cublasLt)
      if(NOT TARGET CUDA::${lib})
        message(FATAL_ERROR "CUDA toolkit found but lib${lib} is missing from it")
      endif()
    endforeach()
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    # cuDNN (kernels/cudnn/): the build needs cudnn.h and the header-only cuDNN
    # frontend (scripts/fetch_cudnn_frontend.sh, called by setup.sh, puts it
    # in .deps/); libcudnn itself is loaded at run time, so a binary built
    # here starts on machines without it and says so when asked for cuDNN.
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${PROJECT_SOURCE_DIR}/.deps/cudnn-frontend/include
              NO_DEFAULT_PATH)
    if(CUDNN_INCLUDE_DIR AND CUDNN_FRONTEND_INCLUDE_DIR)
      set(ENGINE_HAVE_CUDNN ON)
      message(STATUS "cuDNN path enabled (frontend headers ${CUDNN_FRONTEND_INCLUDE_DIR}; libcudnn loaded at run time)")
    else()
      message(STATUS "cuDNN path off: cudnn.h or the cuDNN frontend headers are missing (run scripts/setup.sh); "
                     "--attention cudnn and the workbench's cuDNN rows will say so")
    endif()
    if(NOT NCCL_LIBRARY)
      message(STATUS "NCCL not found: multi-GPU runs will use MPI collectives")
    endif()
    set(ENGINE_HAVE_CUDA ON)
    message(STATUS "CUDA device enabled (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(ENGINE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ENGINE_CUDA=ON but no CUDA compiler was found (install the CUDA toolkit or use OFF)")
  else()
    message(STATUS "CUDA not found: building the CPU-only engine")
  endif()
endif()
