# Helpers shared by the top-level CMakeLists.txt and tests/.
include_guard(GLOBAL)

# tempura_set_warnings(<target>)
# -Wall -Wextra on the target's own sources (never on its consumers), -Werror with TEMPURA_WERROR.
function(tempura_set_warnings target)
    if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
        target_compile_options(${target} PRIVATE -Wall -Wextra)
        # GCC 12 reports -Wrestrict falsely on inlined std::string concatenation at -O3
        # (GCC bug 105329, fixed in 13): it is noise there, not a finding.
        if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
            target_compile_options(${target} PRIVATE -Wno-restrict)
        endif()
        if(TEMPURA_WERROR)
            target_compile_options(${target} PRIVATE -Werror)
        endif()
    elseif(MSVC)
        target_compile_options(${target} PRIVATE /W4 $<$<BOOL:${TEMPURA_WERROR}>:/WX>)
    endif()
endfunction()
