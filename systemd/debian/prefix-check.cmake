# CPack pre-build script: the package is a /usr package. The unit names
# pmcached under the configured prefix and the daemon reads
# /etc/pmcache/pmcached.conf: a package of a build configured with another
# prefix (/usr/local) would install a unit naming a binary it does not hold.
if(NOT CPACK_PMC_INSTALL_PREFIX STREQUAL "/usr")
	message(FATAL_ERROR "pmcache package: this build is configured with "
		"CMAKE_INSTALL_PREFIX=${CPACK_PMC_INSTALL_PREFIX}; the .deb installs "
		"under /usr and its unit would name ${CPACK_PMC_INSTALL_PREFIX}/sbin/pmcached: "
		"configure with -DCMAKE_INSTALL_PREFIX=/usr")
endif()
