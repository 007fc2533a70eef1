#!/usr/bin/perl

# The harness and the set-up fail loudly: a missing test dependency is a
# skip by hand but a failure under CI=true (OmniTest::need and
# OmniTest::skip_without), and "make install-pkgs" exits non-zero when
# apt-get cannot install a package.  No nginx needed.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use OmniTest ();

my $lib = "$FindBin::Bin/lib";
my $top = "$FindBin::Bin/..";

# a test file that needs what it does not have, run as prove would
sub run_child {
    my ($ci, $code) = @_;

    local $ENV{CI} = $ci;
    my $out = `$^X -I$lib -MTest::More -MOmniTest -e '$code' 2>&1`;
    return ($? >> 8, $out);
}

my ($rc, $out) = run_child('', 'OmniTest::need(0, "no frobnicator")');
is($rc, 0, 'need: by hand a missing dependency is no failure');
like($out, qr/^1\.\.0 # SKIP no frobnicator/m, '... the file is skipped');

($rc, $out) = run_child('true', 'OmniTest::need(0, "no frobnicator")');
isnt($rc, 0, 'need: under CI=true it fails the file');
like($out, qr/^not ok 1 - no frobnicator \(CI=true/m, '... saying why');

($rc, $out) = run_child('true', 'OmniTest::need(1, "x"); ok(1); done_testing');
is($rc, 0, 'need: a dependency that is there changes nothing');

my $block = 'SKIP: { OmniTest::skip_without("no widget", 2); ok(0); ok(0) } '
          . 'ok(1, "after"); done_testing';

($rc, $out) = run_child('', $block);
is($rc, 0, 'skip_without: by hand the block is skipped');
like($out, qr/^ok 1 # skip no widget\nok 2 # skip no widget\nok 3 - after/m,
     '... both of its tests, and the file goes on');

($rc, $out) = run_child('true', $block);
isnt($rc, 0, 'skip_without: under CI=true it fails');
like($out, qr/^not ok 1 - no widget \(CI=true.*\nok 2 - after/ms,
     '... once, and the file goes on after the block');

# make install-pkgs with a package no Debian release has: a non-zero exit
# (as root only: apt-get is not run otherwise; needs the package lists)
SKIP: {
    skip 'not root: apt-get is not run', 2 if $> != 0;
    skip 'no apt-get', 2 unless -x '/usr/bin/apt-get';

    my $log = `make -s -C $top install-pkgs NO_APT_UPDATE=1 PKGS=omniroute-no-such-package-xyz 2>&1`;
    isnt($? >> 8, 0, 'make install-pkgs: a package apt-get cannot install '
                     . 'fails the make') or diag($log);
    like($log, qr/omniroute-no-such-package-xyz/, '... naming it');
}

done_testing;
