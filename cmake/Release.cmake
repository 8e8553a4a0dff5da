# Release tarballs: `cmake --build BUILD --target tarball` writes
# BUILD/memlat-VERSION-ARCH.tar.gz (ARCH as uname -m prints it: x86_64, aarch64) holding
# memlat-VERSION-ARCH/ with the static multi-call binary memlat, a symbolic link to it named
# after each tool, README.md with the pages it links (docs/*.md, docs/tools/*.md) and the
# LICENSE file when the tree has one. ./build.sh --release makes one per architecture it builds.

set(MEMLAT_RELEASE_NAME memlat-${PROJECT_VERSION}-${MEMLAT_ARCH})
set(MEMLAT_TARBALL ${CMAKE_BINARY_DIR}/${MEMLAT_RELEASE_NAME}.tar.gz)

set(memlat_release_docs ${PROJECT_SOURCE_DIR}/README.md)
foreach(name LICENSE LICENSE.txt LICENSE.md COPYING)
    if(EXISTS ${PROJECT_SOURCE_DIR}/${name})
        list(APPEND memlat_release_docs ${PROJECT_SOURCE_DIR}/${name})
    endif()
endforeach()
file(GLOB memlat_release_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
file(GLOB memlat_release_tool_pages CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/tools/*.md)
set(stage ${CMAKE_BINARY_DIR}/release/${MEMLAT_RELEASE_NAME})
set(memlat_release_links "")
foreach(link ${MEMLAT_TOOL_LINKS})
    list(APPEND memlat_release_links COMMAND ${CMAKE_COMMAND} -E create_symlink memlat ${stage}/${link})
endforeach()

add_custom_command(
    OUTPUT ${MEMLAT_TARBALL}
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${stage}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${stage}
    COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:memlat> ${memlat_release_docs} ${stage}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${stage}/docs/tools
    COMMAND ${CMAKE_COMMAND} -E copy ${memlat_release_pages} ${stage}/docs
    COMMAND ${CMAKE_COMMAND} -E copy ${memlat_release_tool_pages} ${stage}/docs/tools
    ${memlat_release_links}
    # A fixed mtime: the same build gives the same archive.
    COMMAND ${CMAKE_COMMAND} -E chdir ${CMAKE_BINARY_DIR}/release
            ${CMAKE_COMMAND} -E tar czf ${MEMLAT_TARBALL}.tmp --mtime=1970-01-01 ${MEMLAT_RELEASE_NAME}
    COMMAND ${CMAKE_COMMAND} -E rename ${MEMLAT_TARBALL}.tmp ${MEMLAT_TARBALL}
    DEPENDS memlat ${memlat_release_docs} ${memlat_release_pages} ${memlat_release_tool_pages}
    COMMENT "release tarball ${MEMLAT_RELEASE_NAME}.tar.gz"
    VERBATIM)
add_custom_target(tarball DEPENDS ${MEMLAT_TARBALL})
