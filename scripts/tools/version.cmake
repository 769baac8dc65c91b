# Writes OUT with the git revision of SRC (plus "-dirty" for uncommitted changes), only when it
# changed, so a build after a commit stamps results with the right revision.
execute_process(COMMAND git -C ${SRC} describe --always --dirty --abbrev=10
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rev)
  set(rev "unknown")
endif()
set(text "#pragma once\n#define PDNN_GIT_REV \"${rev}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
