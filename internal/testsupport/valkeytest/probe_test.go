package valkeytest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseConfigVerdict(t *testing.T) {
	refused := "\n*** FATAL CONFIG FILE ERROR (Version 8.0.1) ***\nReading the configuration file, at line 2\n>>> 'timeout \"abc\"'\nargument couldn't be parsed into an integer\n"
	assert.Equal(t, ConfigVerdict{Message: "argument couldn't be parsed into an integer"}, ParseConfigVerdict(refused))
	accepted := "1:C 01 Dec 2026 06:13:58.512 * oO0OoO0OoO0Oo Valkey is starting oO0OoO0OoO0Oo\n17028:M 01 Dec 2026 06:13:58.513 # Configured to not listen anywhere, exiting.\n"
	assert.Equal(t, ConfigVerdict{Accepted: true, Message: "Configured to not listen anywhere, exiting."}, ParseConfigVerdict(accepted))
	late := "17028:M 01 Dec 2026 06:13:58.513 # Failed to configure LOCALE for invalid locale name.\n"
	assert.Equal(t, ConfigVerdict{Message: "Failed to configure LOCALE for invalid locale name."}, ParseConfigVerdict(late))
	assert.True(t, ParseConfigVerdict("").Accepted, "logs sent to a logfile: nothing printed")
	assert.Equal(t, "8.0", MinorVersion("8.0.1"))
}
